"""What the providers' test servers share.

The HTTP scaffolding, the scripted steps, test vectors and the test voice. Each provider's
`server.py` stands on it; nothing here knows a provider.
"""
