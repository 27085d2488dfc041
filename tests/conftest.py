"""Test configuration: the suite runs against the *installed* eagle_sparse
(``--import-mode=importlib``), so the compiled core is the one pip built."""
