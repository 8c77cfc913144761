"""Render stage: validated data in, Plotly figures and page text out. Never imports torch or triton."""
