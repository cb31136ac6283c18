"""A small package of the user's own (the k2 twin cases): tensor-parallel regions written by hand."""
