
(
other.proto"
B
x (Rxbproto3
R

main.protoplother.proto"
A
b (2.pl.BRb"
B
x (Rxbproto3