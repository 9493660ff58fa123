"""The screens of the app, one folder each with its modals."""
