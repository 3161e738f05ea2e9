"""Case generators, one module per operator family (registered with ``@generator``)."""
