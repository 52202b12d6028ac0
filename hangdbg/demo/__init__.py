"""The demo: a real torch.distributed (gloo) job that hangs in a chosen, known way."""
