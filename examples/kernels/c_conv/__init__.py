"""An int8 CONV_2D kernel in C (conv.c) and its qconform target (target.py)."""
