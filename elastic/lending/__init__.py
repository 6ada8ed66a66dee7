"""Lending pool machines to another experiment: the manager's pool and the testbed moved
together (:mod:`elastic.lending.loan`), and checked against each other
(:mod:`elastic.lending.reconcile`). The loan records themselves are the testbed's
(:mod:`elastic.testbed.loans`)."""
