"""tir_passes.contracts: Typed decision records: each has one writer (a pass) and named readers (later stages)."""
