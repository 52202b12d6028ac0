import platform, sys
from setuptools import Extension, setup
ext_modules = []
if sys.version_info[:2] == (3, 11) and platform.python_implementation() == "CPython":
    ext_modules.append(Extension("tracer._ctrace", ["tracer/_ctrace.c"], optional=True))
if platform.python_implementation() == "CPython":
    ext_modules.append(Extension("hangdbg._ncclscan", ["hangdbg/_ncclscan.c"], optional=True))
setup(ext_modules=ext_modules)
