"""lowering.rules: The lowering's rules: one function per TIR node kind (expressions, accesses, reductions, scans), called by from_tir.py's walk."""  # noqa: E501
