"""editspec's language server: the protocol layer over `editspec` (no decoding logic here)."""
