
Ž

item.protoev"_
Item
id (Rid
name (	Rname
tags (	Rtags
sub (2.ev.SubRsubJ"
Sub
v (Rvbproto3