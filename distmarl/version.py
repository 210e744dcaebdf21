"""The package's version, re-exported as ``distmarl.__version__`` (the same as the one in
``pyproject.toml``, which setuptools and the image build read).

A module of its own so that code needing the version (job submission, run tags, the CLI's
``--version``) does not import the root package, whose :func:`distmarl.train` imports the runtime.
"""

__version__ = "0.1.0"
