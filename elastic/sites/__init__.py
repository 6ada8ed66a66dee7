"""Sites of an elastic pool beyond the experiment's own testbed: cloud providers, each behind
boto3 or its own API, apart from the testbed backends that build experiments."""
