"""What a build leaves behind: out-links, the files a flavour must hold, what a consumer sets."""
