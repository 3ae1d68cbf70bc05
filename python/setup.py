"""Only what pyproject.toml cannot say: the wheel carries a native library
(libhvd.so), so it is tagged for this Python and platform, not py3-none-any.
"""

from setuptools import setup
from setuptools.dist import Distribution


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(distclass=BinaryDistribution)
