"""The local paged inference engine. Import submodules directly; this package stays light."""
