"""Maps the source layout onto one import package: libs/forethought -> forethought, services/<name> -> forethought.services.<name>."""
from setuptools import find_packages, setup

library = find_packages("libs", include=["forethought", "forethought.*"])
shells = ["forethought.services"] + [f"forethought.services.{name}" for name in find_packages("services")]
setup(
    packages=library + shells,
    package_dir={"forethought": "libs/forethought", "forethought.services": "services"},
)
