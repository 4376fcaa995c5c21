"""SoloFlow's benchmarks and evaluation harnesses (not shipped in the wheel).

Run from a checkout, at the repository root: ``python benchmarks/bench_runtime.py``, or
``import benchmarks.agentdojo`` with the root on ``sys.path`` (pytest puts it there).
"""
