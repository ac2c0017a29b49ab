"""The guardian: the fetch path's only way out to the network.

policy.py judges an address, urls.py judges a raw URL string and gives its canonical form,
connector.py pins every connection to an address it judged, redirects.py follows hops by hand.
"""
