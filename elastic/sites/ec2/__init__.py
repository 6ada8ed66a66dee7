"""EC2 as a site of ptc's elastic pools: instances of a Slurm cluster, found by their tags.

A site is one way of getting nodes in a region (image, instance type, network, on-demand or
spot, a price per node-hour). The modules, each with one job:

- ``settings``: the region, the endpoint (a loopback URL for moto's fake) and the sites,
  checked field by field; credentials are boto3's own chain, never settings;
- ``provider``: ``Ec2Provider.launch``/``describe``/``terminate`` over boto3's EC2 client;
- ``userdata``: the first-boot script that joins an instance to the cluster (no secrets in it);
- ``autoscaling``: one Auto Scaling group per (cluster, site), its desired count set by a pool;
- ``fallback``: launch at the first site, in a given order, that has room;
- ``reconcile``: orphans and lost nodes, from the pool's records and the tags;
- ``errors``: ``Ec2Error`` and ``CapacityError`` (try another site), naming site and operation.

What moto's fake of AWS cannot do (no capacity, slow boots, spot interruptions) is injected by
a test-only client wrapper that lives with the tests, not here.
"""
