import os
import sys

# tolerances.py lives beside the tests; importlib mode does not put this folder on sys.path.
sys.path.insert(0, os.path.dirname(__file__))
