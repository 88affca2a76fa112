"""Tools for course authors: units and their files, marked regions, the generator, and
running notebooks. Nothing here is embedded in the notebooks (course/*.py is)."""
