"""`hostcheck fleet`: many hosts' reports turned into one verdict, outliers and drift."""
