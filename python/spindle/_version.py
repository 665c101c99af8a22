"""The version of the spindle-ml distribution: the package's and the spindle binary's.

`make wheel` builds the binary with this version (spindle version prints
it) and refuses to package a tree whose version differs, so a wheel never
carries a binary and a package of two releases.
"""

__version__ = "0.1.0"
