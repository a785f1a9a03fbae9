"""The Streamlit workbench's shared pieces: engine access, sidebar, renderers, live runs.

Pages stay thin: they read input, call the core and render what it returns with
these helpers.  Core logic (timelines, comparisons, citation HTML) lives in
``docmind_core``; only Streamlit glue is here.
"""
