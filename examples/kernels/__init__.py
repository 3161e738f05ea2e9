"""A team's own kernels as qconform targets: python_conv (NumPy), c_conv (C through ctypes)."""
