import os
import sys

# reference.py sits beside the tests.
sys.path.insert(0, os.path.dirname(__file__))
