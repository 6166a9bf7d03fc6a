"""tir_passes.checks: Verification of stages: each check returns problems or raises a VerificationError."""
