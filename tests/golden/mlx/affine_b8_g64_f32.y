 ฟCีAKEยะมB+
CpAAFํภp.(Aสeย๔มOอ	BDr@