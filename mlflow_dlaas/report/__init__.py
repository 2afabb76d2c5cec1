"""The comparison report: collect runs, aggregate replicates, tables, plots, recommendations."""
