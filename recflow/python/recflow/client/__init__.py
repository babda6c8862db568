"""Clients: sessions running graphs (session.py), and the model server's
REST (rest.py) and gRPC (grpc.py) clients."""
