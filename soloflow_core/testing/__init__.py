"""Test and benchmark support: seeded synthetic ledgers with known answers
(:mod:`soloflow_core.testing.synthetic_ledger`)."""
