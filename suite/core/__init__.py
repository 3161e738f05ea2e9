"""The core: errors, dtypes, the case model and files, spec tables and checks, LiteRT geometry,
verdict types, comparison, tolerance policy, findings, waivers. Imports only the standard
library and NumPy; every other package builds on it."""
