"""The XML namespaces of GENI v3 RSpecs and their extensions, and the portal's parameter prefix.

One list for the two writers of RSpec elements: ``elastic.profile.rspec`` (parsing and
writing RSpecs) and the geni-lib workarounds in ``elastic.profile.genilib_compat`` (the
portal's extensions, its parameters' data set), which must write exactly what the portal's
geni-lib writes.
"""

from __future__ import annotations

GENI_NS = "http://www.geni.net/resources/rspec/3"
GENI_MANIFEST_XSD = f"{GENI_NS}/manifest.xsd"
EMULAB_NS = "http://www.protogeni.net/resources/rspec/ext/emulab/1"
PARAMS_NS = "http://www.protogeni.net/resources/rspec/ext/profile-parameters/1"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
SHARED_VLAN_NS = "http://www.geni.net/resources/rspec/ext/shared-vlan/1"
ANSIBLE_NS = "http://www.protogeni.net/resources/rspec/ext/ansible/1"
# A profile parameter's name in a request's data set, and in the manifest the portal returns.
PARAM_PREFIX = "emulab.net.parameter."
