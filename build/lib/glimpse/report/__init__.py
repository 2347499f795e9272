"""The comparison lab: which runs the report needs (experiments), training the missing ones
(runs), the measurements and tables (tables), the figures (figures); report.py drives them."""
