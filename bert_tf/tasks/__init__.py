"""Each task's data, features, model head and metrics; the scripts at the root
hold only their flags and `main`, and import the rest from here."""
