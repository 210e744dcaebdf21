"""A trained member's greedy policy as TorchScript or ONNX files that run without distmarl:
:func:`export_policy` writes them, :func:`load` reads them back (``load(path).act(obs)``)."""

from distmarl.export.files import FORMATS, ExportedPolicy, export_policy, load

__all__ = ["FORMATS", "ExportedPolicy", "export_policy", "load"]
