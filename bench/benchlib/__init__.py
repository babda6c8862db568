"""The benchmarks behind bench/run: common.py holds the shared helpers, one module
per benchmark holds the rest (see bench/README.md, "Layout of bench/run")."""
