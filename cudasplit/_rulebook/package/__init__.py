"""The ``[package]`` table of the rule files: its entries (``table``), the parsers of its keys
(``parse``), the tables merged into one package's settings (``load``) and what those settings
answer and how they read (``settings``). The rulebook's face names what the rest of the
package uses."""
