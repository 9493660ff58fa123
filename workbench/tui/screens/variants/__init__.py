"""The variants screen (the first screen: the matrix's variants) and its launch modals."""
