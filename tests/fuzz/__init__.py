"""A differential fuzzer: random S-TIR programs compiled to Triton and compared with TVM (docs/fuzzing.md)."""
