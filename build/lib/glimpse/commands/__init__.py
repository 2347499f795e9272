"""The lab's command lines: ``glimpse-train``, ``glimpse-evaluate`` and ``glimpse-report`` once
installed (``pip install .``), and ``train.py``, ``evaluate.py``, ``report.py`` in a clone: the same
``main`` functions."""
