"""Tools for course authors: the generator, the instructor kit (mistakes, pacing), the
student release, and running notebooks. Nothing here is embedded in the notebooks
(course/*.py is), and the grader never imports it."""
