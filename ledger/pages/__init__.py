"""Pages a person opens: static SVG charts (`svg`), the `diff --html` and `report --html` pages
(`html`), the heat plot as SVG (`heatpage`) and as PNG (`heatplot`, matplotlib, optional extra).
What a heat plot shows is `ledger.heat.chart`; what a diff says is `ledger.compare`."""
