enum _PlaceholderCouchJSON {}
