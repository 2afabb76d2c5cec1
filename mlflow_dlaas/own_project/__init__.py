"""The user's own MLflow Project as what is measured: settings applied around its process,
its process tree watched from outside, and one trial of a study over it."""
