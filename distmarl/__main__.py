"""``python -m distmarl``: the ``distmarl`` command (:func:`distmarl.cli.main`)."""

from distmarl.cli import main

raise SystemExit(main())
