"""Cases from the spec: seeded generators, one module per op family (on the core and the golden)."""
