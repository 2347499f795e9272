"""The comparison lab: which runs the report needs (experiments), training the missing ones
(runs), the records kept of finished runs (records), counting finished checkpoints as its runs
(adoption), the measurements (measurements, taken by build), the document written from them
(document) and its figures (figures); report.py drives them."""
